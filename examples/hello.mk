# tp_hello
