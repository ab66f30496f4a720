import os

os.environ.setdefault("METACL_LITE_PROGRESS", "0")
