"""The output folder a sweep owns: its marker, lock and tidying (folder), every file opened
without following links from its parent's descriptor (walk), and the runs that publish a whole
generation at once (generations). Import from the modules; the face names them only."""
