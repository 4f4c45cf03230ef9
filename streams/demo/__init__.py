"""The course-subscription example of the DCB specification, run by ``dcb demo``."""
