#!/usr/bin/env python3
"""Expected renders of small Jinja templates for engine/jinja_* (tests/engine/jinja_test.cc).

Renders each case of jinja_cases.py's CASES with Jinja2 configured as transformers configures it
for chat templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols; tojson
as json.dumps(ensure_ascii=False); raise_exception), and writes jinja_goldens.json beside this file.
Needs only Jinja2 (Debian: python3-jinja2):

    python3 tests/engine/data/make_jinja_goldens.py
"""
import json
import os

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = [
    ("lstrip_trim_blocks", "  {% if true %}\n  x\n  {% endif %}\n  y", {}),
    ("dash_control", "a  {{- ' b ' -}}  c {%- if true %} d {% endif -%}  e", {}),
    ("comment_lines", "a\n  {# note #}\nb {#- tight -#} c", {}),
    ("trailing_newline", "x\n", {}),
    ("loop_vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
     "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {"xs": ["a", "b", "c"]}),
    ("loop_items", "{% for x in xs %}{{ loop.previtem }}>{{ x }}<{{ loop.nextitem }} {{ loop.cycle('o', 'e') }};{% endfor %}",
     {"xs": [1, 2, 3]}),
    ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("for_filter_else", "{% for x in xs if x.ok %}{{ x.n }}{{ loop.length }} {% else %}none{% endfor %}"
     "{% for x in [] %}x{% else %}empty{% endfor %}", {"xs": [{"ok": True, "n": 1}, {"ok": False, "n": 2}, {"ok": True, "n": 3}]}),
    ("scoping", "{% set a = 1 %}{% set ns = namespace(b=1) %}{% for x in [1, 2] %}{% set a = a + x %}"
     "{% set ns.b = ns.b + x %}{{ a }}{% endfor %}|{{ a }}|{{ ns.b }}", {}),
    ("if_scope_leaks", "{% if true %}{% set v = 'in' %}{% endif %}{{ v }}", {}),
    ("slices", "{{ s[1:3] }}|{{ s[::-1] }}|{{ xs[-2:] }}|{{ s[1] }}|{{ xs[::2] }}|{{ s[:-1] }}|{{ xs[5:] }}",
     {"s": "héllo wörld", "xs": [1, 2, 3, 4, 5]}),
    ("string_methods", "{{ s.split(',') }}{{ s.split() }}{{ '  a b  '.split() }}{{ s.strip('a,') }}"
     "{{ s.startswith(('x', 'a')) }}{{ s.endswith('c') }}{{ s.replace(',', ';', 1) }}{{ s.upper() }}"
     "{{ 'hello world'.title() }}{{ '-'.join(['a', 'b']) }}{{ s.find('b') }}{{ s.count(',') }}"
     "{{ ' x '.lstrip() }}|{{ ' x '.rstrip() }}|{{ 'Ab'.lower() }}{{ 'a b c'.split(' ', 1) }}",
     {"s": "a,b,c"}),
    ("filters_text", "{{ '  pad  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'héllo' | length }}|{{ xs | length }}"
     "|{{ none | string }}|{{ 'a\nb' | indent(2) }}|{{ 'a\nb\n\nc' | indent(4, first=true) }}"
     "|{{ 'AbC' | lower }}{{ 'abc' | upper }}{{ 'abc def' | title }}{{ 'abc' | capitalize }}",
     {"xs": [1, 2]}),
    ("filters_lists", "{{ xs | first }}{{ xs | last }}{{ xs | reverse | list }}{{ xs | join('-') }}"
     "{{ ys | map(attribute='n') | list }}{{ ys | selectattr('n', 'equalto', 2) | list }}"
     "{{ ys | rejectattr('n', 'equalto', 2) | map(attribute='n') | join(',') }}{{ ys | selectattr('ok') | list | length }}"
     "{{ [3, 1, 2] | sort }}{{ ys | sort(attribute='n', reverse=true) | map(attribute='n') | list }}{{ [1, 1, 2] | unique | list }}"
     "{{ ys | join(',', attribute='n') }}{{ {'a': 1, 'b': 2} | items | list }}{{ 'abc' | list }}",
     {"xs": [1, 2, 3], "ys": [{"n": 1, "ok": True}, {"n": 2}, {"n": 3, "ok": False}]}),
    ("filters_numbers", "{{ '42' | int }}{{ 'x' | int }}{{ '3.9' | int }}{{ 'x' | int(7) }}{{ 3.9 | int }}{{ '2.5' | float }}{{ -3 | abs }}"
     "{{ 2.567 | round(1) }}{{ undefined_thing | default('dflt') }}{{ '' | default('e', true) }}{{ 0 | default(5) }}", {}),
    ("tojson", "{{ v | tojson }}|{{ v | tojson(indent=2) }}|{{ 'é\"\\\\\n\t\x01' | tojson }}|{{ [] | tojson }}{{ {} | tojson(indent=2) }}",
     {"v": {"b": [1, 2.5, None, True, "x"], "a": {"k": "ü"}, "e": [], "f": 1e20, "g": 0.1}}),
    ("tests", "{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ none is none }}{{ x is string }}"
     "{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ d is mapping }}{{ xs is iterable }}{{ 3 is odd }}"
     "{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is in 'cat' }}{{ x is not none }}{{ true is boolean }}"
     "{{ false is false }}{{ x is equalto 'x' }}{{ 3 is gt 2 }}{{ d.k is defined }}{{ d.z is defined }}",
     {"x": "x", "d": {"k": 1}, "xs": [1]}),
    ("arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1 + 2.5 }}"
     " {{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }} {{ 3.0 }} {{ 1 / 3 }} {{ -x }} {{ [1] + [2] }}",
     {"x": 5}),
    ("logic", "{{ 0 or 'x' }}{{ 'a' and 'b' }}{{ none or [] }}{{ not 0 }}{{ 1 if false }}|{{ 'y' if 1 else 'n' }}"
     "{{ 1 < 2 and 'b' > 'a' }}{{ 'k' in d }}{{ 2 not in [1] }}{{ [1, 2] == [1, 2] }}{{ d == {'k': 1} }}{{ 1 == 1.0 }}",
     {"d": {"k": 1}}),
    ("repr", "{{ [1, 'a', none, true, 1.5, \"it's\"] }}{{ {'k': 'v', 'n': [1]} }}{{ true }}{{ none }}{{ 'x' }}", {}),
    ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }}", {}),
    ("set_block", "{% set body %}x={{ 1 + 1 }}{% endset %}[{{ body }}]", {}),
    ("dicts", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}"
     "{{ d.get('a') }}{{ d.get('z', 'no') }}{{ d.get('z') }}{{ d['b'] }}{{ d.keys() | list }}{{ d.values() | list }}",
     {"d": {"b": 2, "a": 1}}),
    ("literals", "{{ 'a\\nb' }}|{{ \"q'q\" }}|{{ '\\u00e9' }}|{{ ('x', 'y')[1] }}|{{ {'a': {'b': 1}}['a']['b'] }}|{{ 'ab' 'cd' }}", {}),
    ("undefined_prints_empty", "[{{ nothing }}]{% if nothing %}t{% else %}f{% endif %}{% for x in nothing %}x{% endfor %}", {}),
    ("nested_loops", "{% for a in [1, 2] %}{% set outer = loop.index %}{% for b in 'xy' %}{{ outer }}{{ b }}{{ loop.index }} {% endfor %}{% endfor %}", {}),
    ("raise", "{{ raise_exception('bad input: ' ~ n) }}", {"n": 3}),
    ("undefined_attribute_error", "{{ d.missing.deeper }}", {"d": {}}),
]


def main():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    goldens = []
    for name, source, variables in CASES:
        case = {"name": name, "template": source, "variables": variables}
        try:
            case["text"] = env.from_string(source).render(**variables)
        except Exception as e:
            case["error"] = f"{type(e).__name__}: {e}"
        goldens.append(case)
    with open(os.path.join(HERE, "jinja_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
