import pytest
from preflight.data import sources
from preflight.data.errors import DataError
from preflight.data.store import TableStore

from tests.conftest import write

GPPERF_HEADER = (
    "m,n,k,kernel,layout,block_m,block_n,block_k,stages,alpha,beta,runtime_ms,power_w,energy_j,gpu_name"
)
DEEPBENCH_HEADER = "device,precision,M,N,K,a_trans,b_trans,time_ms,throughput,throughput_unit"


def test_gpperf_leaves_power_out_and_rejects_bad_rows(tmp_path):
    path = write(
        tmp_path,
        "g.csv",
        [
            GPPERF_HEADER,
            "512,512,512,kern,nn,64,64,32,2,1,0,0.04,70.1,.003,NVIDIA GeForce RTX 4070",
            "512,512,512,kern,tn,64,64,32,2,1,0,0.05,[N/A],,NVIDIA GeForce RTX 4070",
            "512,0,512,kern,nn,64,64,32,2,1,0,0.05,[N/A],,NVIDIA GeForce RTX 4070",
            "512,512,512,kern,xx,64,64,32,2,1,0,0.05,[N/A],,NVIDIA GeForce RTX 4070",
            "512,512,512,kern,nn,64,64,32,2,1,0,-1,[N/A],,NVIDIA GeForce RTX 4070",
            "512,512,512,kern,nn,64,64,32,2,1,0,0.05,hot,,NVIDIA GeForce RTX 4070",
            "1024,512,512,kern,nt,64,64,32,2,1,0,0.07,[N/A],,NVIDIA GeForce RTX 4070",
            "2048,512,512,kern,tt,64,64,32,2,1,0,0.09,[N/A],,NVIDIA GeForce RTX 4070",
        ],
    )
    loaded = sources.load("gpperf", path)
    # the published power is a sample taken after the run, not the GEMM's: never a measurement here
    assert len(loaded.rows) == 5 and loaded.rows[["power_w", "energy_j"]].isna().all().all()
    assert bool(loaded.rows["trans_a"][1]) and not bool(loaded.rows["trans_b"][1])
    assert loaded.reject_counts() == {
        "n not a positive integer": 1,
        "layout not one of nn/nt/tn/tt": 1,
        "runtime_ms not positive": 1,
    }


def test_deepbench_parses_precision_and_checks_throughput(tmp_path):
    path = write(
        tmp_path,
        "d.csv",
        [
            DEEPBENCH_HEADER,
            "NV_P100,Float,1024,1024,1024,N,T,0.25,8.59,TERAFLOPS",
            'NV_P100,"16 bit inputs, 32 bit multiplication, 32 bit addition",'
            "1024,1024,1024,T,N,0.25,8.59,TERAFLOPS",
            "NV_P100,Mixed nonsense,1024,1024,1024,N,N,0.25,8.59,TERAFLOPS",
            "NV_P100,Float,1024,1024,1024,N,N,0.25,99.0,TERAFLOPS",
            "NV_P100,Float,1024,1024,1024,X,N,0.25,8.59,TERAFLOPS",
            "NV_1080Ti,Int8 inputs 32 bit math,35,700,2048,N,N,7.85664,12.77,GIGAFLOPS",
        ],
    )
    loaded = sources.load("deepbench", path)
    assert loaded.rows[["dtype", "math_dtype"]].values.tolist() == [
        ["fp32", "fp32"],
        ["fp16", "fp32"],
        ["int8", "fp32"],
    ]
    assert loaded.reject_counts() == {
        "precision not understood": 1,
        "time_ms disagrees with published throughput": 1,
        "a_trans not N or T": 1,
    }


def test_uci_averages_repeats_and_records_noise(tmp_path):
    header = (
        "MWG,NWG,KWG,MDIMC,NDIMC,MDIMA,NDIMB,KWI,VWM,VWN,STRM,STRN,SA,SB,"
        "Run1 (ms),Run2 (ms),Run3 (ms),Run4 (ms)"
    )
    path = write(
        tmp_path,
        "u.csv",
        [header, "16,16,16,8,8,8,8,2,1,1,0,0,0,0,100,100,110,90", "16,16,16,8,8,8,8,2,1,1,0,0,0,1,80,,80,80"],
    )
    loaded = sources.load("uci-sgemm", path)
    row = loaded.rows.iloc[0]
    assert row["runtime_ms"] == 100 and row["repeat_ape_pct"] == pytest.approx(5.0) and row["block_m"] == 16
    assert loaded.reject_counts() == {"a repeat is missing or not a number": 1}


def test_partial_file_is_refused_with_counts(tmp_path):
    path = write(
        tmp_path,
        "d.csv",
        [
            DEEPBENCH_HEADER,
            "NV_P100,Float,1024,1024,1024,N,N,0.25,,",
            "NV_P100,Float,0,1024,1024,N,N,0.25,,",
            "NV_P100,Float,1024,1024,1024,N,N,,,",
        ],
    )
    with pytest.raises(DataError, match="2 of 3 rows are bad"):
        sources.load("deepbench", path)


def test_missing_columns_and_unknown_source_are_clear(tmp_path):
    path = write(tmp_path, "d.csv", ["device,M,N", "NV_P100,1,2"])
    with pytest.raises(DataError, match="lacks columns"):
        sources.load("deepbench", path)
    with pytest.raises(DataError, match="known sources"):
        sources.load("nope", path)
    with pytest.raises(DataError, match="no file"):
        sources.load("gpperf", tmp_path / "absent.csv")


def test_store_records_checksum_and_rejects(tmp_path):
    path = write(
        tmp_path,
        "d.csv",
        [
            DEEPBENCH_HEADER,
            "NV_P100,Float,1024,1024,1024,N,N,0.25,,",
            "NV_P100,Float,1024,1024,1024,N,N,0.5,,",
            "NV_P100,Float,0,1024,1024,N,N,0.25,,",
        ],
    )
    loaded = sources.load("deepbench", path)
    store = TableStore(tmp_path / "tables")
    entry = store.put(loaded, path)
    assert entry["rows"] == 2 and entry["rejected"] == 1 and len(entry["sha256"]) == 64
    assert store.manifest()["deepbench"]["reject_reasons"] == {"m not a positive integer": 1}
    assert len(store.get("deepbench")) == 2
    with pytest.raises(DataError, match="preflight data load"):
        store.get("gpperf")
