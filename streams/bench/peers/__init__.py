"""``dcb bench peers``: one DCB workload on dcb-streams and on what a user would pick instead.

``api`` holds the small interface every system implements, one module per system
(``dcb_streams``, ``eventsourcing_pg``, ``umadb``), ``workload`` the course-subscription
rules and the fold that checks a run's log, ``runner`` the closed loop and its numbers.
"""
