from __future__ import annotations

import yaml

from rag_lab.cli import main
from rag_lab.knowledge.workspace import Workspace


def test_eval_prints_the_projection_and_refuses_a_run_over_budget(tmp_path, capsys):
    cfg = tmp_path / "lab.yaml"
    cfg.write_text(yaml.safe_dump({"prices": {"all-MiniLM-L6-v2-int8": {"input_per_1m": 1000.0}}}))
    code = main(
        [
            "--config",
            str(cfg),
            "--workspace",
            str(tmp_path / "ws"),
            "eval",
            "--dataset",
            "hotpotqa_hipporag100",
            "--limit",
            "3",
            "--max-docs",
            "10",
            "--budget",
            "0.000001",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "projected: 3 questions → 3 chat, 3 embedding, 3 rerank" in err
    assert "over the budget" in err
    with Workspace(tmp_path / "ws") as ws:
        assert ws.list_kbs() == []  # refused before anything was ingested


def test_sweep_projection_counts_every_config(tmp_path, capsys):
    code = main(
        [
            "--workspace",
            str(tmp_path / "ws"),
            "sweep",
            "--dataset",
            "hotpotqa_hipporag100",
            "--limit",
            "2",
            "--max-docs",
            "8",
            "--param",
            "rerank_threshold=0.1,0.2,0.3",
            "--budget",
            "-1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "over the budget" in err
    assert "projected: 6 questions → 6 chat, 6 embedding, 6 rerank" in err  # 2 questions × 3 configs
