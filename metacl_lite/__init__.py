"""metacl-lite: the code under the MetaCL (AAAI 2020) book. One paper equation, one named function."""
__version__ = "0.1.0"
