"""`kb show` and `kb topic import|export`: one record with what refers to it; topics in seed 001's format."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kbtool.cli.app import Format, KbOpt, _load_kb, _print_json, _records, app, fail, print

if TYPE_CHECKING:
    pass


topic_app = typer.Typer(help="Import or export topics in seed 001's record format.", no_args_is_help=True)
app.add_typer(topic_app, name="topic")
# ---- show and topics ----------------------------------------------------------------------------


@app.command()
def show(
    record_id: Annotated[str, typer.Argument(metavar="ID", help="Record id or alias.")],
    json_: Annotated[bool, typer.Option("--json", help="Print the record, references and evidence as JSON.")]
    = False,
    kb: KbOpt = None,
) -> None:
    """Show a record with references, verification and evidence.

    A topic's statements are marked with their claims' verification status.
    """
    from kbtool.model.topic import Topic

    base = _load_kb(kb)
    rec = base.resolve(record_id)
    if json_:
        from kbtool.views.show import show_data

        _print_json(show_data(base, rec.id))
    elif isinstance(rec, Topic):
        from kbtool.render.topic import render_topic

        render_topic(rec, base)
    else:
        from kbtool.render import views as render
        from kbtool.render.console import out
        from kbtool.views.show import show_data

        render.show(out, show_data(base, rec.id))


@topic_app.command("import")
def topic_import(
    file: Annotated[Path, typer.Argument(help="A topic in seed 001's format, .yaml/.yml or .json.")],
    topic_id: Annotated[str | None, typer.Option("--id", help="kb id (default: last part of the source id).")] = None,
    seed: Annotated[str | None, typer.Option("--seed", help="Cite this seed file as the source.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Write records/topics/<id>.yaml.")] = False,
    force: Annotated[bool, typer.Option("--force", help="With --write, replace an existing record.")] = False,
    kb: KbOpt = None,
) -> None:
    """Turn a topic in seed 001's format into a topic record with unlinked statements."""
    from kbtool.model.common import Source
    from kbtool.topic import convert

    data = convert.read_format(file)
    source = Source(type="seed", seed=seed) if seed else Source(type="doc", ref=str(file))
    topic = convert.import_topic(data, source=source, topic_id=topic_id, kb=_load_kb(kb), name=str(file))
    if write:
        dest = convert.write_record(topic, _records(kb), force=force)
        print(f"wrote {dest} ({len(topic.statements)} unlinked statements: attach claim ids under `claims`)")
    else:
        print(convert.dump(convert.record_data(topic)), end="")


@topic_app.command("export")
def topic_export(
    topic_id: Annotated[str, typer.Argument(metavar="ID", help="Topic id or alias.")],
    fmt: Annotated[Format, typer.Option("--format", help="yaml (text) or json")] = Format.text,
    derived: Annotated[bool, typer.Option("--derived", help="Write kb's derived verification, not the "
                                                            "source's.")] = False,
    kb: KbOpt = None,
) -> None:
    """Write a topic back in seed 001's format."""
    from kbtool.model.topic import Topic
    from kbtool.topic import convert
    from kbtool.topic.derive import derive

    base = _load_kb(kb)
    rec = base.resolve(topic_id, "topic")
    if not isinstance(rec, Topic):
        fail(f"'{topic_id}' is not a topic", 2)
    data = convert.export_topic(rec, derive(rec, base) if derived else None)
    print(convert.dump(data, "json" if fmt is Format.json else "yaml"), end="")
