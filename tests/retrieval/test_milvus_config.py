"""The Milvus engine's settings (rag_lab.retrieval.milvus_layout.MilvusConfig): index type and
parameters, shards, replicas, consistency level per search, flush policy; each bad value fails
when the lab config is read, naming the KB, the key and what is allowed. No Milvus needed."""

from __future__ import annotations

import pytest

from rag_lab.knowledge.workspace import Workspace
from rag_lab.retrieval.engines import EngineConfigError, EngineRouter
from rag_lab.retrieval.milvus_layout import MilvusConfig


def test_defaults_keep_the_hnsw_settings_and_flush_only_lite():
    lite = MilvusConfig(uri="m.db")
    assert lite.build_index_params() == {"M": 16, "efConstruction": 200}
    assert lite.dense_search_params(10) == {"ef": 128} and lite.dense_search_params(500) == {"ef": 500}
    assert lite.flushes and not MilvusConfig(uri="http://milvus:19530").flushes
    assert (lite.tenancy, lite.num_partitions) == ("partition_key", 64)
    assert MilvusConfig(uri="http://milvus:19530", flush="per_write").flushes
    assert not MilvusConfig(uri="m.db", flush="never").flushes
    ivf = MilvusConfig.from_mapping(
        {
            "type": "milvus",
            "uri": "m.db",
            "index_type": "IVF_FLAT",
            "index_params": {"nlist": 64},
            "search_params": {"nprobe": 8},
        }
    )
    assert ivf.build_index_params() == {"nlist": 64} and ivf.dense_search_params(50) == {"nprobe": 8}
    hnsw = MilvusConfig(uri="m.db", index_params={"M": 32}, search_params={"ef": 64})
    assert hnsw.build_index_params() == {"M": 32, "efConstruction": 200} and hnsw.dense_search_params(10) == {"ef": 64}
    disk = MilvusConfig(uri="m.db", index_type="DISKANN", search_params={"search_list": 20})
    assert disk.dense_search_params(100) == {"search_list": 100}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"index_type": "IVF"}, "index_type='IVF' must be one of HNSW, FLAT, IVF_FLAT"),
        (
            {"index_params": {"ef": 64}},
            r"index_params: ef not valid for index_type HNSW \(allowed: M, efConstruction\)",
        ),
        (
            {"index_type": "FLAT", "search_params": {"nprobe": 4}},
            r"search_params: nprobe not valid for index_type FLAT \(allowed: none\)",
        ),
        ({"index_type": "IVF_FLAT", "search_params": {"nprobe": 0}}, "search_params.nprobe=0 must be an integer >= 1"),
        ({"index_params": [16]}, r"index_params=\[16\] must be a mapping"),
        ({"num_shards": 0}, r"num_shards=0 must be an integer in \[1, 16\]"),
        ({"replicas": True}, "replicas=True must be an integer >= 1"),
        ({"search_consistency_level": "Quick"}, "search_consistency_level='Quick' must be '' .* or one of Strong"),
        ({"flush": "sometimes"}, "flush='sometimes' must be one of auto, per_write, never"),
        ({"repair_max_rows": -1}, "repair_max_rows=-1 must be an integer >= 0"),
        (
            {"tenancy": "per_tenant"},
            "tenancy='per_tenant' must be one of partition_key, collection_per_tenant, filter",
        ),
        ({"num_partitions": 0}, r"num_partitions=0 must be an integer in \[1, 1024\]"),
        (
            {"tenancy": "filter", "num_partitions": 16},
            "num_partitions=16 applies only with tenancy: partition_key \\(engine.tenancy is 'filter'\\)",
        ),
    ],
)
def test_bad_settings_name_the_kb_and_the_key(tmp_path, settings, message):
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(EngineConfigError, match=r"knowledge_bases\.docs\.engine: engine\." + message):
        EngineRouter(ws, None, {"docs": {"engine": {"type": "milvus", "uri": "x.db", **settings}}})
    ws.close()
