"""The invoke tasks, one collection per module (pyinvoke/invocations' layout).

Each module owns the tasks of one area and, for a namespaced area, its ``ns`` collection
(``invoke site.build`` is ``site.ns``); tasks typed at the root (``invoke all``, ``invoke
test``, ``invoke ab`` ...) are plain tasks of their module. The root collection is built in
one place, ``tasks.py`` at the project root, which invoke finds.

Tasks are thin: they parse what the user typed, call ``core``, ``runtime`` or ``pipelines``
and report through ``almanac_tasks.report``. A user error is one line and exit 2
(``almanac_tasks.errors.user_errors``); anything else is a bug and keeps its traceback.
"""
