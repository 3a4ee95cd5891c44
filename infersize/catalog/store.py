"""The catalogs (configs/*.yaml) loaded into records, and name resolution.

Catalogs are data: adding a model, GPU or precision is a YAML change. User overlays
(`--catalog FILE`) are validated by the same schema and may add entries or replace built-in ones.
"""

from __future__ import annotations

from dataclasses import field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from infersize.catalog.cache import cache_key, load_cached, store_cached
from infersize.catalog.published import AcceptancePrior, PublishedAcceptance
from infersize.catalog.records import (
    Gpu,
    KvDtype,
    Model,
    Record,
    Support,
    SupportGroup,
    VisionTower,
    WeightFormat,
)
from infersize.errors import CatalogError, UnknownNameError
from infersize.files import InputFileError, read_input
from infersize.record import record

R = TypeVar("R", bound=Record)


@record(kw_only=False)
class Table(Generic[R]):
    """Records of one kind by id, plus every lower-cased name (id, alias, HF repo) → id."""

    kind: str
    schema: type[R]
    records: dict[str, R] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)

    def add(self, record: R, origin: Path) -> None:
        record_id: str = getattr(record, "id")  # noqa: B009 - every catalog record has an id
        if record_id in self.records:  # an overlay replaces a built-in entry with the same id
            self.names.update({k: v for k, v in self.names.items() if v != record_id})
        self.records[record_id] = record
        for name in [record_id, *getattr(record, "aliases", []), getattr(record, "hf_repo", "")]:
            if not name:
                continue
            owner = self.names.get(name.lower())
            if owner not in (None, record_id):
                raise CatalogError(
                    f"{origin}: {self.kind} '{record_id}': name '{name}' is already used by "
                    f"'{owner}'"
                )
            self.names[name.lower()] = record_id

    def get(self, name: str) -> R:
        key = self.names.get(name.strip().lower())
        if key is None and self.kind == "model":
            key = self._hub_variant(name)
        if key is None:
            known = [n for n in self.names if "/" not in n]
            hint = "" if self.kind in ("model", "gpu") else "see configs/precisions.yaml"
            raise UnknownNameError(self.kind, name, known, hint)
        return self.records[key]

    def _hub_variant(self, name: str) -> str | None:
        """A Hub id as users paste it (vLLM logs `meta-llama/Llama-3.1-8B-Instruct`): with or
        without its organisation, and its instruct, chat or base variant, which share the
        entry's architecture and so its sizes. The repository name first, then the name
        without variant words; an ambiguous name is refused with its candidates."""
        asked = _without_org(name)
        same = {rid for n, rid in self.names.items() if _without_org(n) == asked}
        if len(same) == 1:
            return same.pop()
        variant = _variant_key(asked)
        found = sorted({rid for n, rid in self.names.items() if _variant_key(n) == variant})
        if len(found) > 1:
            raise UnknownNameError(self.kind, name, found)
        return found[0] if found else None

    def is_alias(self, name: str) -> bool:
        """True when `name` reached a record through an alias rather than its id."""
        return name.strip().lower() != self.names.get(name.strip().lower(), "").lower()


# words that name a checkpoint's variant, not its architecture (Hub repository names)
VARIANT_WORDS = frozenset({"instruct", "it", "chat", "base", "hf"})


def _without_org(name: str) -> str:
    """A Hub id's repository part, lower-cased ('meta-llama/Llama-3.1-8B' -> 'llama-3.1-8b')."""
    text = name.strip().lower()
    return text.split("/", 1)[1] if "/" in text else text


def _variant_key(name: str) -> str:
    return "-".join(w for w in name.split("-") if w not in VARIANT_WORDS)


# n-gram prompt lookup (vLLM method "ngram") as a drafter: no weights, no KV cache, no GPU
# time; it drafts for any target, from the tokens already in the sequence
NGRAM_DRAFTER = Model(
    id="ngram",
    hf_repo="ngram",
    family="ngram",
    tokenizer_family="any",
    architecture="ngram",
    hidden_size=1,
    intermediate_size=1,
    num_hidden_layers=1,
    num_attention_heads=1,
    num_key_value_heads=1,
    vocab_size=1,
    tie_word_embeddings=False,
    speculator="ngram",
    max_position_embeddings=1 << 30,
    notes="n-gram prompt lookup: proposes the tokens that followed the last n-gram's earlier "
    "occurrence in the sequence (vLLM v1/spec_decode/ngram_proposer.py, on the CPU)",
)


NO_WEIGHTS = WeightFormat(
    id="none",
    name="no weights (n-gram lookup)",
    linear_bits_per_weight=16,
    embedding_bits=16,
    lm_head_bits=16,
    norm_bits=16,
    compute_dtype="bf16",
    exact=True,
)


@record
class Catalog:
    models: Table[Model]
    gpus: Table[Gpu]
    weight_formats: Table[WeightFormat]
    kv_dtypes: Table[KvDtype]
    files: tuple[Path, ...]
    published_acceptance: list[PublishedAcceptance] = field(default_factory=list)
    acceptance_prior: list[AcceptancePrior] = field(default_factory=list)  # the last one holds
    # engine family -> precision id -> groups; a later file replaces a (family, precision)
    support_rules: dict[str, dict[str, list[SupportGroup]]] = field(default_factory=dict)

    @property
    def prior_rows(self) -> list[PublishedAcceptance]:
        """The published figures the size prior is fitted to: draft models only."""
        return [r for r in self.published_acceptance if r.use_for_fit and r.method == "draft"]

    def support(self, precision: str, gpu: Gpu, family: str) -> Support:
        """How `gpu` runs `precision` under an engine family (support.yaml)."""
        if gpu.architecture is None:
            return Support("native", f"{gpu.id} has no architecture in the catalog: assumed", True)
        groups = self.support_rules.get(family, {}).get(precision)
        if groups is None:
            reason = f"no support rule for {precision} under {family}: assumed to run"
            return Support("native", reason, True)
        for group in groups:
            if gpu.architecture in group.archs:
                return Support(group.level, group.reason, group.unconfirmed)
        return Support("unsupported", f"no {family} kernel for {precision} on {gpu.architecture}")

    @property
    def prior(self) -> AcceptancePrior:
        if not self.acceptance_prior:
            raise CatalogError("no acceptance_prior in the catalogs (configs/acceptance.yaml)")
        return self.acceptance_prior[-1]

    def model(self, name: str) -> Model:
        if name.strip().lower() == NGRAM_DRAFTER.id:
            return NGRAM_DRAFTER
        return self.models.get(name)

    def gpu(self, name: str) -> Gpu:
        return self.gpus.get(name)

    def weight_format(self, name: str) -> WeightFormat:
        if name.strip().lower() == NO_WEIGHTS.id:
            return NO_WEIGHTS
        return self.weight_formats.get(name)

    def kv_dtype(self, name: str) -> KvDtype:
        return self.kv_dtypes.get(name)


def builtin_config_dir() -> Path:
    """configs/ inside the installed package (the wheel puts it there), or at the top of a
    source checkout. The package's folder is this module's parent's (as importlib.resources
    would give it, without importing zipfile for it)."""
    packaged = Path(__file__).parent.parent / "configs"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent.parent / "configs"


BUILTIN_FILES = ("models.yaml", "gpus.yaml", "precisions.yaml", "acceptance.yaml", "support.yaml")


def _load_file(path: Path, raw: bytes, catalog: Catalog) -> None:
    from infersize.catalog.validation import CatalogFile  # only on a cache miss
    from infersize.catalog.yamlfile import parse_yaml, validate

    doc = parse_yaml(path, raw)
    if not isinstance(doc.data, dict):
        raise CatalogError(f"{path}: expected a mapping with models/gpus/weight_formats/kv_dtypes")
    validate(doc, CatalogFile, doc.data)
    tables: dict[str, Table[Any]] = {
        "models": catalog.models,
        "gpus": catalog.gpus,
        "weight_formats": catalog.weight_formats,
        "kv_dtypes": catalog.kv_dtypes,
    }
    for section, table in tables.items():
        for index, entry in enumerate(doc.data.get(section) or []):
            table.add(validate(doc, table.schema, entry, (section, index)), path)
    for index, entry in enumerate(doc.data.get("published_acceptance") or []):
        row = validate(doc, PublishedAcceptance, entry, ("published_acceptance", index))
        catalog.published_acceptance.append(row)
    for family, precisions in (doc.data.get("support") or {}).items():
        for precision, groups in precisions.items():
            rules = [
                validate(doc, SupportGroup, g, ("support", family, precision, i))
                for i, g in enumerate(groups)
            ]
            catalog.support_rules.setdefault(family, {})[precision] = rules
    if doc.data.get("acceptance_prior") is not None:
        prior = doc.data["acceptance_prior"]
        catalog.acceptance_prior.append(
            validate(doc, AcceptancePrior, prior, ("acceptance_prior",))
        )


@lru_cache(maxsize=8)
def load_catalog(overlays: tuple[Path, ...] = ()) -> Catalog:
    """Built-in catalogs, then each overlay file in order (later entries replace earlier ones)."""
    base = builtin_config_dir()
    files = tuple(base / name for name in BUILTIN_FILES) + tuple(Path(p) for p in overlays)
    empty = {name: Table(kind, schema) for name, (kind, schema) in TABLE_KINDS.items()}
    catalog = _catalog(empty, files)
    blobs = [(str(path), _read(path)) for path in files]
    key = cache_key(blobs, CODE)
    cached = _from_cache(load_cached(key, CACHED_RECORDS), files)
    if cached is not None:
        return cached
    for path, (_, raw) in zip(files, blobs, strict=True):
        _load_file(path, raw, catalog)
    store_cached(key, _to_cache(catalog))
    return catalog


# the record classes a cached catalog holds, by name: nothing else is rebuilt from the cache
CACHED_RECORDS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        Model,
        Gpu,
        WeightFormat,
        KvDtype,
        VisionTower,
        SupportGroup,
        PublishedAcceptance,
        AcceptancePrior,
    )
}
# each table of a catalog: its kind (in messages) and its record class
TABLE_KINDS: dict[str, tuple[str, type[Record]]] = {
    "models": ("model", Model),
    "gpus": ("gpu", Gpu),
    "weight_formats": ("precision", WeightFormat),
    "kv_dtypes": ("kv dtype", KvDtype),
}


def _to_cache(catalog: Catalog) -> dict[str, Any]:
    tables = {name: getattr(catalog, name) for name in TABLE_KINDS}
    return {
        "files": [str(p) for p in catalog.files],
        **{name: {"records": t.records, "names": t.names} for name, t in tables.items()},
        "published_acceptance": catalog.published_acceptance,
        "acceptance_prior": catalog.acceptance_prior,
        "support_rules": catalog.support_rules,
    }


def _from_cache(data: Any, files: tuple[Path, ...]) -> Catalog | None:
    """The catalog a cache entry holds, if it is one of these files (else None: parse)."""
    try:
        if [Path(p) for p in data["files"]] != list(files):
            return None
        tables: dict[str, Table[Any]] = {
            name: Table(kind, schema, dict(data[name]["records"]), dict(data[name]["names"]))
            for name, (kind, schema) in TABLE_KINDS.items()
        }
        if not all(isinstance(r, t.schema) for t in tables.values() for r in t.records.values()):
            return None
        return replace(
            _catalog(tables, files),
            published_acceptance=list(data["published_acceptance"]),
            acceptance_prior=list(data["acceptance_prior"]),
            support_rules=dict(data["support_rules"]),
        )
    except (KeyError, TypeError):
        return None


def _catalog(tables: dict[str, Table[Any]], files: tuple[Path, ...]) -> Catalog:
    return Catalog(
        models=tables["models"],
        gpus=tables["gpus"],
        weight_formats=tables["weight_formats"],
        kv_dtypes=tables["kv_dtypes"],
        files=files,
    )


def _read(path: Path) -> bytes:
    try:
        return read_input(Path(path))
    except InputFileError as exc:
        raise CatalogError(str(exc)) from None


# the modules whose classes a cached catalog holds: an edit to any of them misses the cache
CODE = tuple(
    Path(__file__).with_name(name)
    for name in ("store.py", "records.py", "published.py", "validation.py", "names.py")
)
