"""Where and how fast a run trains: the device and its determinism settings, compiled task gradients and the fast
evaluation (optional speed paths outside the method's arithmetic), and the progress bars."""
