"""What a workshop host uses beside the tabs: every page as a link (links.py, page_state.py), the lessons as
scenes (scenes.py, scene_bar.py), the presenter view (presenter.py), following the host (follow/, follow_rooms.py),
and where the app runs with the defaults that follow (hosting.py)."""
