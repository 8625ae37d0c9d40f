"""Handler discovery: finding the threads that do a file system's I/O, and whose they are."""
