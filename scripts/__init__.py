"""What a person runs; a package only so that tests and benchmarks import scripts.benchlib."""
