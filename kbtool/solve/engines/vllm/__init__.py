"""vLLM behind the engine contract (kbtool/solve/engines/base.py): its engine module (engine.py), its backend
selection from priority and claim records (selection.py), its serve-line parser (args.py), its memory accounting
(memory.py, pool.py, mamba.py) and its recorded boots (boots.py)."""
