"""The tool a model's call means, when the model wrapped its name.

Open models served through OpenAI-compatible endpoints do not always send back the name
they were offered: gpt-oss's harmony format addresses a call `to=functions.NAME`, and some
servers pass that on whole, or with the channel glued on (`NAME<|channel|>commentary`);
small models change its case or quote it. Each failed as a call of an unknown tool, and the
model spent a turn calling it again, often the same way.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

_NAME_PREFIXES = ("functions.", "function.", "tools.", "tool.")


def tool_name_of(name: str, real_names: Mapping[str, str]) -> str:
    """The tool a call's `name` means: its wire name's tool, else the name as a model wrapped
    it, unwrapped — `functions.calc` and `calc<|channel|>commentary` (gpt-oss's harmony
    format, as some servers pass it on), quotes or spaces around it, another case or `_` for
    `-` when one tool alone has that name so retyped. Anything else stays as given, and the
    call fails as a call of an unknown tool (the model reads which tools there are). Each of
    these cost a turn the model spent calling the tool again, often the same way."""
    if name in real_names:
        return real_names[name]
    if name in real_names.values():  # the tool's own name where the wire's was expected
        return name
    bare = name.split("<|", 1)[0].strip().strip("\"'`").strip()
    for prefix in _NAME_PREFIXES:
        if bare.lower().startswith(prefix):
            bare = bare[len(prefix) :]
            break
    if bare in real_names:
        return real_names[bare]
    folded = [wire for wire in real_names if _folded(wire) == _folded(bare)]
    return real_names[folded[0]] if len(folded) == 1 else name


def _folded(name: str) -> str:
    """A name as a model may retype it: any case, `-` and `_` alike (`final_answer`)."""
    return name.lower().replace("-", "_")
