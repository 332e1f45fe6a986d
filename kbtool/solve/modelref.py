"""`--model NAME`: a record id or alias, a config.json path, or a clear error for a Hugging Face id or a
record that does not validate."""

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
    bad = _skipped(img, key)
    if bad is not None:
        from kbtool.errors import UsageError

        file, why = bad
        raise UsageError(f"--model: record {key} does not validate: {why}",
                         fix=f"fix {file} (run `kb validate {file}`)")
    if HF_ID.match(key):
        raise hf_id_error(key)
    return None


def _skipped(img: Image, name: str) -> tuple[str, str] | None:
    """(file, why) of a records/models file named `name` that was left out of the KB."""
    want = f"{name.lower()}.yaml"
    for entry in img.skipped:
        file, _, why = entry.partition(": ")
        parts = file.replace("\\", "/").split("/")
        if parts[-1].lower() == want and (len(parts) < 2 or parts[-2] == "models"):
            return file, why
    return None
