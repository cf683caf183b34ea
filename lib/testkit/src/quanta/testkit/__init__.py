"""What the tests and benchmarks share, and no service installs: shared data and HDT files
(`data`), the reference engine (`oracle`), suspended engine runs (`engine`), the gateway in a
thread and a stand-in worker (`gateway`), a scripted HTTP server (`client`), WatDiv query
variants (`workloads`)."""
