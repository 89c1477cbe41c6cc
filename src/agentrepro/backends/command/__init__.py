"""The command backend (backend.py): any external trainer described by command templates (template.py), run without a
shell, with the arguments where a program would run a value as code refused (code_words.py)."""
