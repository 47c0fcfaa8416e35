;; The wasm/write-without-fs.write probe: in the workspace, preopened at
;; fd 3, open the file "present" for reading, then create the file
;; "written" for writing and write one byte to it.
;;   exit 0:       "written" was created and written
;;   exit E:       the create answered WASI errno E (1..76)
;;   exit 128 + E: the read answered errno E: the workspace is not mounted
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "present")
  (data (i32.const 16) "written")
  ;; An iovec of the byte "w" at 16: {buf 16, len 1}.
  (data (i32.const 32) "\10\00\00\00\01\00\00\00")
  ;; 48: the opened fd; 56: the number of bytes written.
  (func (export "_start")
    (local $errno i32)
    ;; path_open(dirfd, lookupflags, path, path_len, oflags,
    ;;           rights_base, rights_inheriting, fdflags, &fd)
    ;; rights fd_read (1<<1); no oflags.
    (local.set $errno
      (call $path_open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 7)
        (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 48)))
    (if (local.get $errno)
      (then (call $proc_exit (i32.add (i32.const 128) (local.get $errno)))))
    ;; oflags O_CREAT|O_TRUNC (1|8), rights fd_write (1<<6).
    (local.set $errno
      (call $path_open (i32.const 3) (i32.const 0) (i32.const 16) (i32.const 7)
        (i32.const 9) (i64.const 64) (i64.const 0) (i32.const 0) (i32.const 48)))
    (if (local.get $errno)
      (then (call $proc_exit (local.get $errno))))
    (drop (call $fd_write (i32.load (i32.const 48)) (i32.const 32) (i32.const 1) (i32.const 56)))
    (call $proc_exit (i32.const 0))))
