#!/usr/bin/env python3
"""Render every chat template in tests/data/templates/ with Hugging Face transformers and write goldens.

Runs on the GPU machine (Python 3.12, transformers 5.x, jinja2, tokenizers); needs no network and downloads no
model: each template is set on a tiny in-memory PreTrainedTokenizerFast and rendered through
`apply_chat_template(..., tokenize=False)`, the same code path a real checkpoint uses (it compiles the template
with transformers' own jinja2 environment: trim_blocks, lstrip_blocks, loopcontrols, its tojson filter,
raise_exception and strftime_now).

Inputs:  tests/data/templates/*.jinja and tests/data/templates/conversations.json (shared with the C++ test).
Output:  one <template>.json per template in OUT_DIR, each holding every conversation x variant: either the
         rendered text or the error the template raised (an expected error, which Seedling must also raise).

The clock that strftime_now reads is pinned to conversations.json's "now", so goldens do not depend on the day
they were made; the script checks the pin took effect before writing anything.

Usage:
  python3 tools/make_template_goldens.py OUT_DIR                  # transformers route (the reference)
  python3 tools/make_template_goldens.py OUT_DIR --route jinja2   # plain jinja2 copy of the environment,
                                                                  # only for smoke-testing this script locally
Then copy OUT_DIR/*.json to tests/data/templates/golden/.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
TEMPLATE_DIR = REPO / "tests" / "data" / "templates"


class FixedClock:
    """A stand-in for datetime.datetime whose now() is pinned."""

    pinned: dt.datetime = dt.datetime(2025, 1, 1)

    @classmethod
    def now(cls, tz=None):
        return cls.pinned


def pin_transformers_clock(now: dt.datetime) -> None:
    from transformers.utils import chat_template_utils as ctu

    FixedClock.pinned = now

    class PinnedDatetime(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return now

    current = getattr(ctu, "datetime", None)
    if current is dt.datetime:  # `from datetime import datetime`
        ctu.datetime = PinnedDatetime
    elif current is dt:  # `import datetime`
        shim = type(sys)("datetime_shim")
        shim.__dict__.update(dt.__dict__)
        shim.datetime = PinnedDatetime
        ctu.datetime = shim
    else:
        raise SystemExit(f"cannot pin the clock: transformers.utils.chat_template_utils.datetime is {current!r}")
    compile_fn = getattr(ctu, "_compile_jinja_template", None)
    if compile_fn is not None and hasattr(compile_fn, "cache_clear"):
        compile_fn.cache_clear()


class TransformersRenderer:
    route = "transformers.PreTrainedTokenizerFast.apply_chat_template(tokenize=False)"

    def __init__(self, template: str, special: dict):
        from tokenizers import Tokenizer, models

        try:
            from transformers import PreTrainedTokenizerFast
        except ImportError:  # transformers 5.x may name the tokenizers-backed class TokenizersBackend only
            from transformers import TokenizersBackend as PreTrainedTokenizerFast

        backend = Tokenizer(models.WordLevel(vocab={"<unk>": 0}, unk_token="<unk>"))
        tokens = {k: v for k, v in special.items() if v is not None}
        self.tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", **tokens)
        self.tok.chat_template = template

    def render(self, messages, tools, add_generation_prompt: bool, kwargs: dict) -> str:
        out = self.tok.apply_chat_template(
            messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
        )
        if not isinstance(out, str):
            raise SystemExit(f"apply_chat_template(tokenize=False) returned {type(out).__name__}, expected str")
        return out

    def context_tokens(self) -> dict:
        tokens = getattr(self.tok, "special_tokens_map", {}) or {}
        return {k: v for k, v in tokens.items() if isinstance(v, str)}


class Jinja2Renderer:
    """A plain-jinja2 copy of transformers' environment; for checking this script where transformers is absent."""

    route = "jinja2 ImmutableSandboxedEnvironment copy (smoke test only, not a reference)"

    def __init__(self, template: str, special: dict):
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        def strftime_now(fmt):
            return FixedClock.now().strftime(fmt)

        class GenerationTag(jinja2.ext.Extension):
            tags = {"generation"}

            def parse(self, parser):
                lineno = next(parser.stream).lineno
                body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
                return jinja2.nodes.Scope(body).set_lineno(lineno)

        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
        )
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = strftime_now
        self.template = env.from_string(template)
        self.tokens = {k: v for k, v in special.items() if v is not None}
        self.tokens["unk_token"] = "<unk>"

    def render(self, messages, tools, add_generation_prompt: bool, kwargs: dict) -> str:
        return self.template.render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt,
            **self.tokens, **kwargs
        )

    def context_tokens(self) -> dict:
        return dict(self.tokens)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=pathlib.Path)
    parser.add_argument("--route", choices=["transformers", "jinja2"], default="transformers")
    parser.add_argument("--templates", type=pathlib.Path, default=TEMPLATE_DIR)
    args = parser.parse_args()

    spec = json.loads((args.templates / "conversations.json").read_text(encoding="utf-8"))
    now = dt.datetime.fromisoformat(spec["now"])
    FixedClock.pinned = now

    versions = {"python": sys.version.split()[0]}
    import jinja2

    versions["jinja2"] = jinja2.__version__
    if args.route == "transformers":
        import transformers

        versions["transformers"] = transformers.__version__
        pin_transformers_clock(now)
        renderer_cls = TransformersRenderer
    else:
        renderer_cls = Jinja2Renderer

    probe = renderer_cls("{{ strftime_now('%Y-%m-%d %H:%M:%S') }}", {})
    got = probe.render([{"role": "user", "content": "x"}], None, False, {})
    if got != now.strftime("%Y-%m-%d %H:%M:%S"):
        raise SystemExit(f"clock pin failed: strftime_now gave {got!r}, expected {now:%Y-%m-%d %H:%M:%S}")

    args.out_dir.mkdir(parents=True, exist_ok=True)
    templates = sorted(args.templates.glob("*.jinja"))
    if not templates:
        raise SystemExit(f"no *.jinja in {args.templates}")
    for path in templates:
        name = path.stem
        source = path.read_text(encoding="utf-8")
        special = spec["special_tokens"].get(name)
        if special is None:
            raise SystemExit(f"{path.name}: add its bos_token/eos_token to special_tokens in conversations.json")
        renderer = renderer_cls(source, special)
        cases = []
        n_err = 0
        for conv in spec["conversations"]:
            tools = spec["tool_sets"][conv["tools"]] if "tools" in conv else None
            for variant in spec["variants"]:
                kwargs = dict(conv.get("kwargs", {}))
                kwargs.update(variant["kwargs"])
                case = {
                    "conversation": conv["name"],
                    "variant": variant["name"],
                    "add_generation_prompt": variant["add_generation_prompt"],
                    "kwargs": kwargs,
                }
                try:
                    case["output"] = renderer.render(
                        copy.deepcopy(conv["messages"]), copy.deepcopy(tools), variant["add_generation_prompt"],
                        copy.deepcopy(kwargs)
                    )
                except Exception as e:  # a template that raises is an expected error, recorded as such
                    case["error"] = {"type": type(e).__name__, "message": str(e)}
                    n_err += 1
                cases.append(case)
        golden = {
            "template": path.name,
            "route": renderer.route,
            "versions": versions,
            "now": spec["now"],
            "context_tokens": renderer.context_tokens(),
            "cases": cases,
        }
        out = args.out_dir / f"{name}.json"
        out.write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"{path.name}: {len(cases)} cases, {n_err} expected errors -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
