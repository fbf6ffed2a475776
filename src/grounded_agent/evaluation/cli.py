"""`grounded-agent eval`: arguments and entry point (placeholder until the harness lands)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sample", type=int, default=300)


def run_eval(args: argparse.Namespace) -> int:
    raise NotImplementedError("the evaluation harness is not built yet")
