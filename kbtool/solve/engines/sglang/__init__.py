"""SGLang behind the engine contract (kbtool/solve/engines/base.py): its engine module (engine.py), its own resolution
of backends, page size and KV dtype from records (resolve.py, facts.py), its mem_fraction_static (fraction.py), its
token pool (pool.py) and its launch-line parser (args.py)."""
