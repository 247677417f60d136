# tp_mlp
