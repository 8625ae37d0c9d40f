"""vnodectl: the admin's command line."""
