"""The reports: everything that reads results files and writes text, tables, figures and pages (the paper's numbers,
our tables beside them, the generated comparison, the claims and their verdicts, plots, the book's notebooks and the
assignments). It imports the method and the lab, never the command line."""
