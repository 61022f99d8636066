"""Several replicas as one: key-ring agreement between peers and staged key rotation at run time."""
