"""tailtrace analysis: reads a run directory, ties scheduler delay to the P99."""
