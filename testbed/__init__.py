"""mtcbed: a real multi-host Gfarm on one machine, one network namespace per host."""
