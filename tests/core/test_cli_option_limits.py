"""Every numeric option of every command has stated limits, and a number outside them is refused in one sentence
before any work starts (the class of issue 20's "plan numbers checked against stated limits", for the commands
whose own parameters had none: text, notes, CTF, age, generator, benchmarks)."""
import argparse
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairdesk.cli import build_parser, main
from fairdesk.cli.limits import BY_COMMAND, LIMITS, OPEN, entry_for, numeric_actions
from fairdesk.core.errors import DataError
from fairdesk.core.limits import check_number

PARSER = build_parser()
ACTIONS = list(numeric_actions(PARSER))


def _check(command, action, text):
    """What the command line does with ``text`` given to ``action``: argparse's conversion, then the limits."""
    low, high, whole, what, *rest = entry_for(command, action.option_strings[0])
    return check_number(action.type(text), action.option_strings[0], low, high, whole=whole, what=what,
                        open_ends=OPEN in rest)


def test_every_numeric_option_of_every_command_has_stated_limits():
    missing = sorted({f"{command} {action.option_strings[0]}" for command, action in ACTIONS
                      if entry_for(command, action.option_strings[0]) is None})
    assert not missing, f"numeric options without limits in fairdesk/cli/limits.py: {missing}"
    used = {a.option_strings[0] for _, a in ACTIONS} | {o for _, o in BY_COMMAND}
    assert not set(LIMITS) - used - {"--carry", "--discovery-fraction", "--max-order", "--min-size"}, \
        "entries for options no command has"


@pytest.mark.parametrize("command,action", ACTIONS, ids=[f"{c} {a.option_strings[0]}" for c, a in ACTIONS])
def test_the_default_lies_within_the_limits(command, action):
    if action.default is not None:
        _check(command, action, str(action.default))


@given(pick=st.integers(0, len(ACTIONS) - 1), data=st.data())
def test_a_number_outside_the_limits_is_refused_naming_the_option_and_a_number_inside_is_kept(pick, data):
    command, action = ACTIONS[pick]
    low, high, whole, _what, *rest = entry_for(command, action.option_strings[0])
    option = action.option_strings[0]
    if whole:
        outside = st.one_of(st.integers(max_value=low - 1), st.integers(min_value=high + 1))
    else:
        outside = st.one_of(st.floats(max_value=float(low), exclude_max=OPEN not in rest, allow_nan=False),
                            st.floats(min_value=float(high), exclude_min=OPEN not in rest, allow_nan=False))
    bad = data.draw(outside if whole else st.one_of(outside, st.sampled_from([math.nan, math.inf, -math.inf])))
    text = str(bad) if isinstance(bad, int) else repr(bad)
    with pytest.raises(DataError) as err:
        _check(command, action, text)
    assert str(err.value).startswith(f"{option} ") and "\n" not in str(err.value)
    inside = data.draw(st.integers(int(math.ceil(low)), int(high)) if whole else
                       st.floats(low, high, exclude_min=OPEN in rest, exclude_max=OPEN in rest))
    assert _check(command, action, str(inside)) == inside


def _subparser(command: str):
    parser = PARSER
    for name in command.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _required(parser) -> list[str]:
    """The smallest command line argparse accepts: every required option and positional with a plain value."""
    argv: list[str] = []
    for a in parser._actions:
        if not (a.required or not a.option_strings) or isinstance(a, argparse._SubParsersAction) or a.nargs == 0:
            continue
        value = str(a.choices[0]) if a.choices else "1" if a.type in (int, float) else "X"
        argv += ([a.option_strings[0]] if a.option_strings else []) + [value]
    return argv


@pytest.mark.parametrize("command,action", ACTIONS, ids=[f"{c} {a.option_strings[0]}" for c, a in ACTIONS])
def test_every_command_refuses_a_number_outside_its_limits_in_one_sentence_with_exit_2_and_writes_nothing(
        command, action, tmp_path, capsys, monkeypatch):
    """Through ``main`` as a user types it: exit 2, one line naming the option, before any work (no file opened:
    the required paths are "X", which does not exist), nothing written."""
    monkeypatch.chdir(tmp_path)
    option = action.option_strings[0]
    low, high, whole, *_ = entry_for(command, option)
    bad = str(int(high) + 1) if whole else "inf"
    assert main(command.split() + _required(_subparser(command)) + [option, bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fairdesk-cli: error: {option} {bad} ") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []
