"""Names as users paste them: Hub ids (as vLLM logs them) resolve to catalog entries with or
without their organisation and in their instruct, chat or base variant; `-h` is `--help`
everywhere; the shell completes model, GPU, engine and method names."""

from __future__ import annotations

import pytest
from click.testing import CliRunner as ClickRunner
from typer.main import get_command
from typer.testing import CliRunner

from infersize.cli import app
from infersize.errors import UnknownNameError


@pytest.mark.parametrize(
    ("pasted", "entry"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
        ("qwen2.5-7b-instruct", "qwen2.5-7b"),
        ("Qwen2.5-7B", "qwen2.5-7b"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
        ("meta-llama/Llama-3.3-70B", "llama-3.3-70b"),  # the catalog holds the instruct repo
        # an instruct entry of its own wins over its base's
        ("Llama-3.2-1B-Instruct", "llama-3.2-1b-instruct"),
        ("meta-llama/Llama-3.2-1B", "llama-3.2-1b"),
    ],
)
def test_hub_ids_resolve_to_catalog_entries(catalog, pasted, entry):
    assert catalog.model(pasted).id == entry


def test_an_ambiguous_variant_lists_its_candidates(catalog):
    with pytest.raises(UnknownNameError) as error:
        catalog.model("llama-3.2-1b-base-chat")
    assert str(error.value) == (
        "unknown model 'llama-3.2-1b-base-chat': did you mean 'llama-3.2-1b', "
        "'llama-3.2-1b-instruct'?"
    )


def test_spec_says_which_entry_a_hub_id_became(runner):
    result = runner.invoke(
        app,
        [
            "spec",
            "--target",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--draft",
            "llama-3.2-1b",
            "--gpu",
            "h100",
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        "note: 'meta-llama/Llama-3.1-8B-Instruct' is sized as llama-3.1-8b "
        "(meta-llama/Llama-3.1-8B): instruct, chat and base variants share its architecture"
    ) in result.output


def _commands(group, path=()):
    for name, command in group.commands.items():
        yield (*path, name)
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))


def test_dash_h_is_help_everywhere():
    command = get_command(app)
    paths = [(), *_commands(command)]
    assert len(paths) > 10
    runner = ClickRunner()
    for path in paths:
        short = runner.invoke(command, [*path, "-h"], prog_name="infersize")
        long = runner.invoke(command, [*path, "--help"], prog_name="infersize")
        assert short.exit_code == 0, (path, short.output)
        assert short.output == long.output


def _complete(words: str) -> list[str]:
    """What bash completion offers for the last word of `words` (Typer's protocol)."""
    env = {
        "_INFERSIZE_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - 1),
    }
    result = CliRunner().invoke(app, [], prog_name="infersize", env=env)
    assert result.exit_code == 0, result.output
    return result.output.split()


@pytest.mark.parametrize(
    ("words", "expected", "absent"),
    [
        ("infersize spec --target llama-3.1", {"llama-3.1-8b", "llama-3.1-70b"}, "qwen3-8b"),
        ("infersize spec --draft ng", {"ngram"}, "none"),
        ("infersize spec --gpu h20", {"h200"}, "h100"),
        ("infersize spec --engine sg", {"sglang", "sglang-0.4", "sglang-0.5.9"}, "vllm"),
        ("infersize spec --method eag", {"eagle", "eagle3"}, "mtp"),
        ("infersize capacity --gpu l4", {"l4"}, "a100"),
    ],
)
def test_shell_completes_names(words, expected, absent):
    offered = _complete(words)
    assert expected <= set(offered)
    assert absent not in offered
