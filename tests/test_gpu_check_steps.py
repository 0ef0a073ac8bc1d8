"""scripts/gpu_check.sh against what names its steps: every figure on the results page is remade by the command
beside it, so each `gpu_check.sh STEP` that checks.json names must be a step the script has, and its usage comment
must list every step it has."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
STEP_LABEL = re.compile(r"^ {8}([a-z0-9][a-z0-9-]*)\)", re.MULTILINE)     # a step's label in the script's case


def script_steps() -> set[str]:
    return set(STEP_LABEL.findall(SCRIPT.read_text()))


def usage_comment() -> str:
    lines = SCRIPT.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Steps:"))
    comment = []
    for line in lines[start:]:
        if not line.startswith("#"):
            break
        comment.append(line[1:])
    return " ".join(comment)


def named_steps(command: str) -> list[str]:
    """The steps a shell command asks gpu_check.sh for: the words after it, up to the next && or ;."""
    found = []
    for tail in re.findall(r"gpu_check\.sh((?:\s+[^\s&;|]+)*)", command):
        found += [word for word in tail.split() if not word.startswith("$")]
    return found


def test_the_script_has_its_steps():
    steps = script_steps()
    assert {"tests", "suite", "read-ceiling", "torch-suite-all", "headlines"} <= steps
    assert "esac" not in steps


def test_the_usage_comment_lists_every_step():
    comment = usage_comment()
    missing = [step for step in sorted(script_steps())
               if not re.search(rf"(?<![\w-]){re.escape(step)}(?![\w-])", comment)]
    assert not missing, f"gpu_check.sh's usage comment does not name these steps: {missing}"


def test_every_command_on_the_results_page_names_a_step_the_script_has():
    steps = script_steps()
    commands = []
    for listing in sorted((ROOT / "bench" / "results").glob("*/checks.json")):
        commands += [(listing.name, check["command"]) for check in json.loads(listing.read_text())["checks"]]
    assert any("gpu_check.sh" in command for _, command in commands)
    unknown = [(where, step) for where, command in commands for step in named_steps(command)
               if step not in steps and not step.endswith(".yaml")]
    assert not unknown, f"commands name steps gpu_check.sh does not have: {unknown}"


def test_named_steps_reads_the_words_after_the_script_only():
    assert named_steps(". scripts/gpu_env.sh && scripts/gpu_check.sh suite") == ["suite"]
    assert named_steps("OUT=x scripts/gpu_check.sh v15 tests && python3 other.py a b") == ["v15", "tests"]
    assert named_steps("python3 scripts/read_ceiling.py --json x.json") == []
