;; The wasm/deadline probe: _start never returns, so only the call's
;; deadline can end it.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $forever
      (br $forever))))
