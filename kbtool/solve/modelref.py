"""`--model NAME`: a record id or alias, a config.json path, or a clear error for a Hugging Face id.

(A model record that does not validate never reaches here: kbtool/query_cli.py refuses to answer from a
records tree with errors and names the record's file, line and field.)"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kbtool.solve.image import Image


def resolve_model(img: Image, name: str) -> str | None:
    """The id `name` names, after loading a config.json into `img` where it is one; None to fall back to the
    plain name lookup (which reports an unknown name with the nearest ids)."""
    key = name.strip()
    if key.lower() in img.names("model"):
        return None
    from kbtool.store.hfconfig_file import HF_ID, hf_id_error, looks_like_path, read_config

    if looks_like_path(key):
        from kbtool.solve.image import _model_row

        rec = read_config(key)
        from kbtool.model.model_card import Model

        return img.add_model(_model_row(Model.model_validate(rec)))
    if HF_ID.match(key):
        raise hf_id_error(key)
    return None

