"""Course tooling: the autograded assignments, the student kit and folder grading."""
