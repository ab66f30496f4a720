"""The paper's numbers as data: every table of the paper is there, with the right rows."""
from metacl_lite.paper import PAPER_SOURCES, PAPER_TABLES, paper_table
from metacl_lite.training import METHODS


def test_tables_present():
    assert set(PAPER_TABLES) == set(PAPER_SOURCES)
    assert set(paper_table("pmnist", 20)) == set(METHODS) | {"joint"}
    assert set(paper_table("cub", 10)) == set(METHODS)
    for K in (50, 200, 500):
        assert set(paper_table("pmnist", K)) == set(METHODS) - {"ewc", "ewc-metacl-beta", "ewc-metacl-lambda"} | {"joint"}
    assert paper_table("pmnist", 20)["pi-metacl-lambda"] == {"ACC": (56.0, 0.4), "BT": (-7.8, 0.5), "FA": (2.1, 0.9)}
    assert paper_table("cifar100", 20)["joint"]["BT"] is None
    assert paper_table("pmnist", 7) is None
