"""What pyproject.toml cannot say: hcqdsl_sanitize.pth is installed beside the package (in site-packages, by a wheel and by an
editable install alike), so that `HCQ_SANITIZE=1 python train.py` sanitizes a program (docs/sanitize.md, "Switching it
on"). Python runs the file's one line at startup: it looks HCQ_SANITIZE up and imports nothing when it is not set."""
from pathlib import Path
from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "hcqdsl_sanitize.pth"

class BuildPy(build_py):
  def run(self):
    super().run()
    self.copy_file(PTH, str(Path(self.build_lib, PTH)), preserve_mode=0)

cmdclass: dict = {"build_py": BuildPy}
try:
  from setuptools.command.editable_wheel import editable_wheel

  class EditableWheel(editable_wheel):
    def _create_wheel_file(self, bdist_wheel):   # (setuptools' editable wheel has no build_py output: the file is added to it)
      path = super()._create_wheel_file(bdist_wheel)
      from wheel.wheelfile import WheelFile
      with WheelFile(path, "a") as whl: whl.write(PTH, PTH)
      return path
  cmdclass["editable_wheel"] = EditableWheel
except ImportError: pass

setup(cmdclass=cmdclass)
