"""The lab: everything that runs and records grids of the method (results and tuning files, the units of a grid and
where they run, beta/gamma on validation data and hparams.json, the open choices, the speed benchmark, provenance
and atomic writes). It imports the method (`metacl_lite`), never the reports or the command line."""
