"""Each change handed to the streams that wait for it, on the event loop or in fan-out processes."""
