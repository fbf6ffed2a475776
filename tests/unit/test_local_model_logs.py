"""What bench_local_model.py and the local-model e2e tests read from each server's own log: the
HTTP 500s (llama-server logs no access lines, only its errors) and the tokens each completion
generated. Lines as the two engines print them (llama.cpp build 11434, llama-cpp-python 0.3.36)."""

from __future__ import annotations

from tests.support.benchmarks import ROOT, load_script

LOCAL = load_script(ROOT / "scripts" / "local_model.py")

LLAMA_SERVER = """\
slot launch_slot_: id  0 | task 12 | processing task
slot print_timing: id  0 | task 12 | prompt eval time =    1520.31 ms /   311 tokens (    4.89 ms per token,   204.56 tokens per second)
slot print_timing: id  0 | task 12 |        eval time =    1301.52 ms /    44 tokens (   29.58 ms per token,    33.81 tokens per second)
slot print_timing: id  0 | task 12 |       total time =    2821.83 ms /   355 tokens
srv    operator(): got exception: {"error":{"code":400,"message":"Unsupported param: x","type":"invalid_request_error"}}
srv    operator(): got exception: {"error":{"code":500,"message":"Unknown role","type":"server_error"}}
srv   send_error: task id = 13, error: got exception: vector::_M_range_check
slot print_timing: id  1 | task 14 |        eval time =    8301.52 ms /   256 tokens (   32.43 ms per token,    30.84 tokens per second)
"""

LLAMA_CPP_PYTHON = """\
llama_perf_context_print: prompt eval time =    1459.11 ms /   290 tokens (    5.03 ms per token,   198.75 tokens per second)
llama_perf_context_print:        eval time =    2211.35 ms /    61 runs   (   36.25 ms per token,    27.59 tokens per second)
INFO:     127.0.0.1:50120 - "POST /v1/chat/completions HTTP/1.1" 200 OK
INFO:     127.0.0.1:50122 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error
INFO:     127.0.0.1:50124 - "GET /v1/models HTTP/1.1" 200 OK
"""


def test_llama_servers_500s_are_its_error_lines_not_its_400s() -> None:
    found = LOCAL.http_500s(LLAMA_SERVER)
    assert len(found) == 2
    assert '"code":500' in found[0] and "send_error" in found[1]


def test_llama_cpp_pythons_500s_are_its_access_lines_with_500() -> None:
    found = LOCAL.http_500s(LLAMA_CPP_PYTHON)
    assert found == [LLAMA_CPP_PYTHON.splitlines()[3]]


def test_generated_tokens_per_completion_from_either_engine_not_the_prompt() -> None:
    assert LOCAL.generated_tokens(LLAMA_SERVER) == [44, 256]
    assert LOCAL.generated_tokens(LLAMA_CPP_PYTHON) == [61]
