import pathlib, sys
sys.path.insert(0, str(pathlib.Path(__file__).parent))  # tests share strategies.py and helpers
