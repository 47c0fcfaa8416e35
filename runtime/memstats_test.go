package runtime_test

import goruntime "runtime"

type runtimeMemStats = goruntime.MemStats

func readMemStats(m *goruntime.MemStats) { goruntime.ReadMemStats(m) }
