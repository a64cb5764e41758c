import sys

from benchmarks.bench_groups import main

sys.exit(main())
