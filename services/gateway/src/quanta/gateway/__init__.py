"""quanta's HTTP gateway: admits queries into the Redis stream and answers with the workers' pages."""
