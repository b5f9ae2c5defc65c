"""nbgrader settings of a student's JupyterLab (see the README, "A student's JupyterLab").

The exchange folder and the student id come from the environment, as a JupyterHub
course sets them: NBGRADER_EXCHANGE (default /srv/nbgrader/exchange, nbgrader's own)
and JUPYTERHUB_USER (default: the login name).
"""

import getpass
import os

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)
c.CourseDirectory.course_id = "attention-course"
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
c.CourseDirectory.student_id = os.environ.get("JUPYTERHUB_USER") or getpass.getuser()
