"""What pairs there are and where their files come from: the presets, what a user typed, the Hub, each preset's status, `python -m specviz models`."""
