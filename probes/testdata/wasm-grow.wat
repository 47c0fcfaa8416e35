;; The wasm/memory-cap probe, for a cap of 1MiB (16 pages): grow the memory
;; to the cap, then past it.
;;   exit 0: grown to 16 pages, and the grow to 64 pages (4MiB) refused
;;   exit 1: the grow to 16 pages, within the cap, refused
;;   exit 2: the grow to 64 pages, past the cap, granted
;; The memory declares no maximum: the cap alone bounds it.
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (if (i32.eq (memory.grow (i32.const 15)) (i32.const -1))
      (then (call $proc_exit (i32.const 1))))
    (if (i32.ne (memory.grow (i32.const 48)) (i32.const -1))
      (then (call $proc_exit (i32.const 2))))
    (call $proc_exit (i32.const 0))))
