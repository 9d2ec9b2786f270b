"""Regenerate every figure of hassejax into paper_figures/ (placeholder until the experiments land)."""

import sys

if __name__ == "__main__":
    print("No experiments yet.")
    sys.exit(0)
