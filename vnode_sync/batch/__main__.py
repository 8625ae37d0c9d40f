import time

# Taken before the heavy imports (grpc, cryptography: about 0.4 s) so a hook's time bound covers them.
STARTED = time.monotonic()

import sys  # noqa: E402

from vnode_sync.batch.cli import main  # noqa: E402

sys.exit(main(started=STARTED))
